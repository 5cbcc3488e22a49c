// The `recipe` executable: all of it lives in the library.
#include "levers/app/cli.hpp"

int main(int argc, char** argv) { return levers::main(argc, argv); }
