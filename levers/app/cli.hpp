// The `recipe` command line. A user's own binary gets all of it with
//   int main(int argc, char** argv) { return levers::main(argc, argv); }
// for the recipes its own LEVERS_RECIPE definitions register (the shipped ones
// live in the `recipe` executable).
#pragma once

namespace levers {

// Exit codes: 0 success, 1 the recipe failed while running, 2 bad command line
// (unknown recipe or parameter, malformed value); nothing runs on 2.
int main(int argc, char** argv);

}  // namespace levers
