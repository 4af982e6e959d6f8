void launch(int* p, float* f);
int main() { launch(nullptr, nullptr); return 0; }
