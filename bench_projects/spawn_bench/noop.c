/* The program every spawn method starts: exits at once. Built with
 * `gcc -static -O2` so exec needs no dynamic loader and the cost measured is the
 * spawn itself (fork/vfork/clone + exec + exit + wait), not library loading. */
int main(void) { return 0; }
