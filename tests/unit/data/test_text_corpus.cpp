#include "levers/core/error.hpp"
#include "levers/data/files.hpp"
#include "levers/data/text_corpus.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>

using namespace levers;

TEST_CASE("byte corpus: each file's tail is held out for validation") {
    testing::TempDir dir;
    dir.write("a.txt", std::string(100, 'a'));
    dir.write("b.txt", std::string(50, 'b'));
    dir.write("ignored.md", "not text for the corpus");
    auto corpus = data::load_byte_corpus(dir.path(), 0.1);
    CHECK(corpus.train.size() == 90 + 45);
    CHECK(corpus.validation.size() == 10 + 5);
    CHECK(corpus.validation[0] == 'a');
    CHECK(corpus.validation[corpus.validation.size() - 1] == 'b');
    // A second load maps the node's cached copy: the same tokens.
    auto again = data::load_byte_corpus(dir.path(), 0.1);
    CHECK(again.train.to_vector() == corpus.train.to_vector());
}

TEST_CASE("the installed book corpus is real English text of a few megabytes" *
          testing::needs({testing::Data::books})) {
    auto corpus = data::load_byte_corpus(data::data_dir() / "books", 0.05);
    CHECK(corpus.train.size() > 2'000'000);
    std::int64_t spaces = 0;
    for (std::int64_t i = 0; i < corpus.train.size(); ++i) spaces += corpus.train[i] == ' ';
    CHECK(spaces > corpus.train.size() / 8);  // English: about one byte in six is a space
}

TEST_CASE("batches: targets are inputs shifted by one; sequential batches tile the tokens") {
    std::vector<std::int32_t> values(100);
    for (int i = 0; i < 100; ++i) values[i] = i;
    const auto tokens = data::TokenFile::from(values);
    Rng rng(1);
    auto b = data::random_batch(tokens, 4, 8, rng);
    CHECK(b.inputs.shape() == Shape{4, 8});
    for (int i = 0; i < 32; ++i) CHECK(b.targets.data<std::int32_t>()[i] == b.inputs.data<std::int32_t>()[i] + 1);
    data::TokenBatch s;
    CHECK(data::sequential_batch(tokens, 2, 8, 5, s));
    CHECK(s.inputs.data<std::int32_t>()[0] == 80);
    CHECK_FALSE(data::sequential_batch(tokens, 2, 8, 6, s));  // would need token 112
    CHECK(data::sequential_batch(tokens, 2, 8, 1, s, 3));      // windows 2 and 3, three apart: tokens 48, 72
    CHECK(s.inputs.data<std::int32_t>()[0] == 48);
    CHECK(s.inputs.data<std::int32_t>()[8] == 72);
    CHECK_FALSE(data::sequential_batch(tokens, 2, 8, 2, s, 3));  // window 5 would start at 120
}

TEST_CASE("a corpus file that is empty, binary or absent is refused by name") {
    testing::TempDir dir;
    auto empty = dir.write("empty.txt", "");
    CHECK_THROWS_WITH_AS(data::load_byte_corpus(empty, 0.1), doctest::Contains("empty.txt: empty file"), Error);
    auto binary = dir.write("bin.txt", std::string("ab\0cd", 5));
    CHECK_THROWS_WITH_AS(data::load_byte_corpus(binary, 0.1), doctest::Contains("bin.txt: has a NUL byte at offset 2"),
                         Error);
    CHECK_THROWS_WITH_AS(data::load_byte_corpus(dir.path() / "nope.txt", 0.1), doctest::Contains("nope.txt: no such file"),
                         Error);
}
