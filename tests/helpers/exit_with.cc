// exit_with N [ANY...]: exits with status N. Further arguments are ignored (tests use
// them to send arguments of a given size).
#include <cstdlib>

int main(int argc, char** argv) { return argc > 1 ? std::atoi(argv[1]) : 0; }
