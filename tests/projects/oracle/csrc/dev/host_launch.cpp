void dev_launch(int* x);
void consumer_entry(int* x) { dev_launch(x); }
