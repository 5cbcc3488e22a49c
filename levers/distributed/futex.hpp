// Waiting on a 32-bit word shared between processes (the futex syscall,
// process-shared form: std::atomic::wait does not work across processes
// with libstdc++ 12).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace levers::dist {

// Sleeps while *word == expected, at most `timeout`; may return early
// (spuriously, or on a wake): callers re-check their condition.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every waiter on `word`.
void futex_wake_all(std::atomic<std::uint32_t>* word);

}  // namespace levers::dist
