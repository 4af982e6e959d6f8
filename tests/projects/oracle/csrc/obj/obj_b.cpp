void obj_launch(int* x);
void obj_b_entry(int* x) { obj_launch(x); }
