#include "textstat.h"

unsigned long checksum(const char *text) {
  unsigned long h = 5381;
  for (; *text; ++text) h = h * 33 + (unsigned char)*text;
  return h;
}
