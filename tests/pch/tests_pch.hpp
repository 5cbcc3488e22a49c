// What most test files include, parsed once per test binary (meson's cpp_pch)
// instead of once per file: doctest, JSON, formatting, the tensor and module
// headers. A test file still includes what it uses; this only speeds the build.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "levers/core/error.hpp"
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"
