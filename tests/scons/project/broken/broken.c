/* Does not compile on purpose: the tests compare the compiler's diagnostics. */
int broken(void) {
  return undeclared_identifier + 1;
}
