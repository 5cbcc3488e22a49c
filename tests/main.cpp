// doctest's runner. Both macros: where a precompiled header has included
// doctest already, the second include compiles only the implementation, which
// DOCTEST_CONFIG_IMPLEMENT selects.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
