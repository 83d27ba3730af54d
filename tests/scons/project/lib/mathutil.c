#include "textstat.h"
#ifdef HAVE_LIBM
#include <math.h>
double spread(double a, double b) { return sqrt(a * a + b * b); }
#else
double spread(double a, double b) { return a > b ? a - b : b - a; }
#endif
