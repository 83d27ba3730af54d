// Prints what it was started with, hex-encoded so any byte survives: "a <hex>" per
// argument after argv[0], then "e <hex>" per environment entry. Compared against the
// same program started through /bin/sh.
#include <stdio.h>

extern char** environ;

static void put(char tag, const char* s) {
  putchar(tag);
  putchar(' ');
  for (; *s; ++s) printf("%02x", (unsigned char)*s);
  putchar('\n');
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) put('a', argv[i]);
  for (char** e = environ; *e; ++e) put('e', *e);
  return 0;
}
