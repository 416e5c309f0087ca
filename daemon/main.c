/* placeholder: the daemon is being written */
int main(void) { return 0; }
