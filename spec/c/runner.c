/* placeholder until the C API tests land */
int main(void) { return 0; }
