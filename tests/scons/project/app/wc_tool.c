#include <stdio.h>
#include "textstat.h"
#include "version.h"

int main(int argc, char **argv) {
  printf("wc_tool %s\n", TEXTSTAT_VERSION);
  for (int i = 1; i < argc; ++i) printf("%s: %zu\n", argv[i], count_words(argv[i]));
  return 0;
}
