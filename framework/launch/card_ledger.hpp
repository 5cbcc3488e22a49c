// The card ledger: which job holds which card on this node.
//
// Every levers process on the node shares it through one lock file per card
// (flock, so a dead holder's lock frees itself). A job takes all the cards it
// needs at the same moment or none; jobs that must wait queue first come,
// first served, each holding a lock on its own ticket file so `recipe status`
// can list live waiters and stale tickets are swept. Lock files hold the
// holder's job name and pid as JSON for whoever asks who holds a card.
//
// On a machine without CUDA cards the "cards" are CPU core slots: `recipe run`
// takes all of them (or ranks x --threads), and a sweep cell takes one per rank.
//
// Where:  LEVERS_LEDGER_DIR, else /run/lock/levers-cards (or /tmp/levers-cards
//         without /run/lock): one directory for every user of the node, so
//         the directory is sticky and world-writable and lock files are 0666.
// Which:  CPU slots: LEVERS_CPU_SLOTS, else the cores this process may use.
//         CUDA cards: those CUDA_VISIBLE_DEVICES lists, else every card.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace levers::launch {

struct CardHolder {
    int card = 0;
    std::string job;
    long pid = 0;
};

struct Waiter {
    std::string job;
    long pid = 0;
    int cards = 0;  // how many it waits for
};

// Cards held by this process until release() or destruction.
class CardLease {
public:
    CardLease() = default;
    CardLease(CardLease&&) noexcept;
    CardLease& operator=(CardLease&&) noexcept;
    CardLease(const CardLease&) = delete;
    CardLease& operator=(const CardLease&) = delete;
    ~CardLease();

    const std::vector<int>& cards() const { return cards_; }
    void release();

private:
    friend class CardLedger;
    std::vector<int> cards_;
    std::vector<int> fds_;  // the held locks, one per card
};

class CardLedger {
public:
    // kind is "cpu" (core slots) or "cuda"; cards are the ids this process may use.
    CardLedger(std::filesystem::path dir, std::string kind, std::vector<int> cards);
    // The ledger of this node as the environment describes it (see above).
    // cuda_cards: how many CUDA cards the node has (0: use CPU slots).
    static CardLedger for_node(int cuda_cards = 0);

    // Takes n cards at once, or returns nothing if they are not free now or an
    // earlier job is queued for cards.
    std::optional<CardLease> try_acquire(int n, const std::string& job);
    // Takes n cards, queueing until they are free together; `say` is told once
    // what the job waits for and who holds the cards. Throws levers::Error if
    // n is more than the ledger has, or, with wait false, if they are busy.
    CardLease acquire(int n, const std::string& job, bool wait, const std::function<void(const std::string&)>& say);

    const std::string& kind() const { return kind_; }
    const std::vector<int>& cards() const { return cards_; }
    const std::filesystem::path& dir() const { return dir_; }
    std::vector<CardHolder> holders() const;  // live holders only
    std::vector<Waiter> waiters() const;      // live waiters, oldest first

private:
    std::filesystem::path lock_path(int card) const;
    std::optional<CardLease> take(int n, const std::string& job);
    std::string busy_message(int n) const;

    std::filesystem::path dir_;
    std::string kind_;
    std::vector<int> cards_;
};

// The cards this process's job holds (empty until `recipe run` takes them); a
// recipe that sweeps from inside its run (Plan::map) gives them up for its cells.
CardLease& job_lease();

// The card ids CUDA_VISIBLE_DEVICES allows among `count` cards (all when the
// variable is unset). Throws levers::Error naming an entry that is not a card
// index of this node.
std::vector<int> visible_cuda_cards(int count, const char* cuda_visible_devices);

}  // namespace levers::launch
