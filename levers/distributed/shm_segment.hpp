// A named POSIX shared-memory segment (Boost.Interprocess) that a job's ranks
// map. Created with mode 0600 and an unguessable name; the creator removes the
// name when it is destroyed, so no segment outlives the job that made it.
#pragma once

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <cstddef>
#include <string>

namespace levers::dist {

class ShmSegment {
public:
    // Creates a new zero-filled segment; fails if the name exists.
    static ShmSegment create(const std::string& name, std::size_t bytes);
    // Maps an existing segment, whole.
    static ShmSegment open(const std::string& name);
    // "levers-<pid>-<64 random bits in hex>".
    static std::string unique_name();
    // Removes segments whose creating process no longer runs (a killed creator
    // cannot remove its own); creators call it first. Returns how many went.
    static int sweep_stale();

    ShmSegment(ShmSegment&&) noexcept;
    ShmSegment& operator=(ShmSegment&&) noexcept;
    ~ShmSegment();

    void* data() const { return region_.get_address(); }
    std::size_t size() const { return region_.get_size(); }
    const std::string& name() const { return name_; }
    // Removes the name now (mappings stay valid); the creator's destructor does this too.
    void remove();

private:
    ShmSegment(std::string name, boost::interprocess::mapped_region region, bool owner);
    std::string name_;
    boost::interprocess::mapped_region region_;
    bool owner_ = false;
};

}  // namespace levers::dist
