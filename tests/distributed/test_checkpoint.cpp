#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/checkpoint.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <functional>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace levers;

namespace {
std::vector<NamedTensor> sample_tensors(float scale) {
    Tensor w = Tensor::zeros({3, 5}, DType::f32), m = Tensor::zeros({7}, DType::f64), ids = Tensor::zeros({2}, DType::i32);
    for (int i = 0; i < 15; ++i) w.data<float>()[i] = scale * static_cast<float>(i);
    for (int i = 0; i < 7; ++i) m.data<double>()[i] = -0.5 * i;
    ids.data<std::int32_t>()[1] = 42;
    return {{"w", w}, {"adam.m", m}, {"cursor", ids}};
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

void overwrite(const std::filesystem::path& p, std::size_t at, const std::string& bytes) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

TEST_CASE("checkpoints round-trip tensors and metadata exactly") {
    testing::TempDir dir;
    const auto path = dir.path() / "ck.levers";
    write_checkpoint(path, {{"step", 17}, {"recipe", "pretrain"}}, sample_tensors(1.5f));
    auto ck = read_checkpoint(path);
    CHECK(ck.metadata["step"] == 17);
    CHECK(ck.at("w").shape() == Shape{3, 5});
    CHECK(ck.at("w").data<float>()[14] == 21.0f);
    CHECK(ck.at("adam.m").data<double>()[6] == -3.0);
    CHECK(ck.at("cursor").data<std::int32_t>()[1] == 42);
    CHECK(read_checkpoint_metadata(path) == ck.metadata);  // the header alone gives the same metadata
    CHECK_THROWS_WITH_AS(ck.at("v"), doctest::Contains("no tensor 'v'; it holds: w, adam.m, cursor"), Error);
    CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST_CASE("truncated, corrupted, foreign and other-version checkpoints are refused by name") {
    testing::TempDir dir;
    const auto good = dir.path() / "good.levers";
    write_checkpoint(good, {{"step", 1}}, sample_tensors(1));
    const std::string bytes = read_file(good);
    struct Case {
        const char* name;
        std::function<void(const std::filesystem::path&)> damage;
        const char* message;
    };
    const Case cases[] = {
        // The data is 3 tensors each padded to 64 bytes: 192 bytes at the end of the file.
        {"truncated", [&](const auto& p) { std::filesystem::resize_file(p, bytes.size() - 100); }, "truncated: tensor"},
        {"stub", [&](const auto& p) { std::filesystem::resize_file(p, 30); }, "truncated: the header"},
        {"tensor byte", [&](const auto& p) { overwrite(p, bytes.size() - 192 + 5, "\x7f"); },
         "tensor 'w' does not match its checksum"},
        {"header byte", [&](const auto& p) { overwrite(p, 25, "Z"); }, "the header's checksum does not match"},
        {"magic", [&](const auto& p) { overwrite(p, 0, "NOTLEVER"); }, "not a levers checkpoint"},
        {"version", [&](const auto& p) { overwrite(p, 8, std::string("\x09\0\0\0", 4)); },
         "checkpoint format version 9, this levers reads version 1"},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        const auto p = dir.path() / (std::string(c.name) + ".levers");
        std::filesystem::copy_file(good, p);
        c.damage(p);
        const std::string error = error_of([&] { read_checkpoint(p); });
        CAPTURE(error);
        CHECK(error.find(p.string() + ": ") != std::string::npos);
        CHECK(error.find(c.message) != std::string::npos);
        // The metadata reader refuses the same header faults; it reads no tensor, so damage there passes.
        const std::string meta_error = error_of([&] { read_checkpoint_metadata(p); });
        CAPTURE(meta_error);
        if (c.message == std::string("truncated: tensor") || c.message == std::string("tensor 'w' does not match its checksum")) {
            CHECK(meta_error == "(no error)");
        } else {
            CHECK(meta_error.find(p.string() + ": ") != std::string::npos);
            CHECK(meta_error.find(c.message) != std::string::npos);
        }
    }
    CHECK_THROWS_WITH_AS(read_checkpoint(dir.path() / "none.levers"), doctest::Contains("no such file"), Error);
    CHECK_THROWS_WITH_AS(read_checkpoint_metadata(dir.path() / "none.levers"), doctest::Contains("none.levers: "),
                         Error);
}

TEST_CASE("a checkpoint write killed at random moments never loses the previous checkpoint") {
    testing::TempDir dir;
    const auto path = dir.path() / "ck.levers";
    write_checkpoint(path, {{"step", 0}}, sample_tensors(0));
    // Big enough that a write takes a while.
    Tensor big = Tensor::zeros({1 << 22}, DType::f32);
    int interrupted = 0;  // rounds killed mid-write (a temporary file left behind)
    for (int round = 1; round <= 12; ++round) {
        pid_t child = fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            for (int k = 0;; ++k) write_checkpoint(path, {{"step", round}}, {{"big", big}});
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(4 * round));
        ::kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        interrupted += std::filesystem::exists(path.string() + ".tmp");
        auto ck = read_checkpoint(path);  // checksums verified: the last complete write, never a torn one
        CHECK(ck.metadata["step"].get<int>() <= round);
    }
    CHECK(interrupted > 0);
}
