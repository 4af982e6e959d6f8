void obj_launch(int* x);
void obj_a_entry(int* x) { obj_launch(x); }
