// print_env: writes every environment entry followed by a NUL byte, in order.
#include <cstring>

#include "tests/helpers/write_all.h"

extern char** environ;

int main() {
  for (char** e = environ; *e; ++e) spawnpool::test::write_all(1, *e, std::strlen(*e) + 1);
  return 0;
}
