// The `recipe` executable: all of it lives in the library.
#include "framework/app/cli.hpp"

int main(int argc, char** argv) { return levers::main(argc, argv); }
