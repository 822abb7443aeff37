// The server's queue of accepted requests (launcher/http_server.cpp): handler threads
// push, the engine thread pops in arrival order; close() lets pop drain what is queued
// and then return null.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

namespace dsv4 {

template <class Job>
class RequestQueue {
 public:
  // False when the queue is closed (the job is not taken).
  bool push(std::shared_ptr<Job> job) {
    std::lock_guard lock(m_);
    if (closed_) return false;
    jobs_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }
  std::shared_ptr<Job> pop() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return nullptr;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
  }
  void close() {
    std::lock_guard lock(m_);
    closed_ = true;
    cv_.notify_all();
  }
  size_t size() const {
    std::lock_guard lock(m_);
    return jobs_.size();
  }

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool closed_ = false;
};

}  // namespace dsv4
