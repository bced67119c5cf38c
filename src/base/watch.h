// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Watch: a thread that looks at a condition every 5 ms while an operation runs that cannot look
// at it itself, and acts once when it holds (an abort flag of the caller's copied into the
// communicator's, which the operation's waits watch). It ends when the Watch goes out of scope.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace clb {

class Watch {
 public:
  Watch(std::function<bool()> holds, std::function<void()> act) {
    thread_ = std::thread([this, holds = std::move(holds), act = std::move(act)] {
      std::unique_lock<std::mutex> g(mutex_);
      while (!done_) {
        if (holds()) {
          act();
          return;
        }
        wake_.wait_for(g, std::chrono::milliseconds(5));
      }
    });
  }
  ~Watch() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace clb
