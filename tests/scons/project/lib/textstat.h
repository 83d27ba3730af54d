#ifndef TEXTSTAT_H
#define TEXTSTAT_H
#include <stddef.h>
size_t count_words(const char *text);
unsigned long checksum(const char *text);
double spread(double a, double b);
#endif
