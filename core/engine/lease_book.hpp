// The runs a worker holds right now, with the version each slot last
// committed: the lease keeper renews exactly these, and marks a run lost when
// the database no longer has it at that version under this worker.
// Thread-safe: slots and the keeper share one book.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store.hpp"

namespace cairn {

class LeaseBook {
 public:
  void Hold(const std::string& run_id, int64_t version) {
    std::lock_guard lock(mutex_);
    held_[run_id] = {version, false};
  }
  // After a committed checkpoint. The fenced commit proves the run is still
  // ours, even if a renewal that raced it had marked it lost.
  void Update(const std::string& run_id, int64_t version) {
    std::lock_guard lock(mutex_);
    auto it = held_.find(run_id);
    if (it != held_.end()) it->second = {version, false};
  }
  void Drop(const std::string& run_id) {
    std::lock_guard lock(mutex_);
    held_.erase(run_id);
  }
  bool Lost(const std::string& run_id) const {
    std::lock_guard lock(mutex_);
    auto it = held_.find(run_id);
    return it != held_.end() && it->second.lost;
  }
  std::vector<store::HeldRun> Snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<store::HeldRun> runs;
    runs.reserve(held_.size());
    for (const auto& [id, entry] : held_) {
      if (!entry.lost) runs.push_back({id, entry.version});
    }
    return runs;
  }
  // After a renewal: every run of `asked` neither renewed nor busy is lost,
  // unless its slot committed a newer version meanwhile (the renewal raced
  // the checkpoint, which extended the lease itself). Returns how many it marked.
  int64_t MarkLost(const std::vector<store::HeldRun>& asked, const store::LeaseRenewal& renewal) {
    auto contains = [](const std::vector<std::string>& ids, const std::string& id) {
      return std::find(ids.begin(), ids.end(), id) != ids.end();
    };
    std::lock_guard lock(mutex_);
    int64_t marked = 0;
    for (const auto& run : asked) {
      if (contains(renewal.renewed, run.run_id) || contains(renewal.busy, run.run_id)) continue;
      auto it = held_.find(run.run_id);
      if (it != held_.end() && it->second.version == run.version && !it->second.lost) {
        it->second.lost = true;
        ++marked;
      }
    }
    return marked;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return held_.size();
  }

 private:
  struct Entry {
    int64_t version = 0;
    bool lost = false;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> held_;
};

}  // namespace cairn
