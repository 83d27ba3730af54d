// write_streams [out:TEXT | err:TEXT]...: writes each TEXT, in order, to stdout or
// stderr with one write() each (so a merged capture shows them in this order).
#include <cstring>

#include "tests/helpers/write_all.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strncmp(arg, "out:", 4) == 0)
      spawnpool::test::write_all(1, arg + 4, std::strlen(arg + 4));
    else if (std::strncmp(arg, "err:", 4) == 0)
      spawnpool::test::write_all(2, arg + 4, std::strlen(arg + 4));
    else
      return 2;
  }
  return 0;
}
