#include <ctype.h>
#include "textstat.h"

size_t count_words(const char *text) {
  size_t n = 0;
  int in_word = 0;
  for (; *text; ++text) {
    if (isspace((unsigned char)*text)) {
      in_word = 0;
    } else if (!in_word) {
      in_word = 1;
      ++n;
    }
  }
  return n;
}
