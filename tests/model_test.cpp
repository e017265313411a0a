#include <catch2/catch.hpp>
TEST_CASE("placeholder compiles", "[model]") { CHECK(true); }
