// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The registry of live handles (base/live_handles.h): a handle a thread remembers as alive is
// refused once it is removed, by that thread and by another, and found again once added again
// (a new object at a freed one's address); more handles than a thread remembers all stay found.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "base/live_handles.h"

namespace {

struct Obj {
  long v;
};

TEST(LiveHandles, ARemovedHandleIsRefusedEvenWhereItWasRemembered) {
  clb::LiveHandles<Obj> live;
  Obj a{1}, b{2};
  EXPECT_FALSE(live.contains(&a));
  live.add(&a);
  live.add(&b);
  for (int i = 0; i < 3; i++) EXPECT_TRUE(live.contains(&a));  // remembered after the first
  bool otherSaw = false;
  std::thread t([&] { otherSaw = live.contains(&a) && live.contains(&b); });
  t.join();
  EXPECT_TRUE(otherSaw);
  EXPECT_TRUE(live.remove(&a));
  EXPECT_FALSE(live.contains(&a)) << "remembered by this thread, removed since";
  EXPECT_TRUE(live.contains(&b));
  std::thread u([&] { otherSaw = live.contains(&a); });
  u.join();
  EXPECT_FALSE(otherSaw);
  EXPECT_FALSE(live.remove(&a)) << "a second removal finds it gone";
  live.add(&a);
  EXPECT_TRUE(live.contains(&a));
  {
    std::unique_lock<std::shared_mutex> g(live.mutex());
    EXPECT_TRUE(live.containsLocked(&a));
    EXPECT_TRUE(live.removeLocked(&a));
  }
  EXPECT_FALSE(live.contains(&a));
  EXPECT_FALSE(live.contains(nullptr));
}

TEST(LiveHandles, MoreHandlesThanAThreadRemembers) {
  clb::LiveHandles<Obj> live;
  std::vector<Obj> objs(100);
  for (const Obj& o : objs) live.add(&o);
  for (int round = 0; round < 2; round++)
    for (const Obj& o : objs) EXPECT_TRUE(live.contains(&o));
  for (size_t i = 0; i < objs.size(); i += 2) EXPECT_TRUE(live.remove(&objs[i]));
  for (size_t i = 0; i < objs.size(); i++) EXPECT_EQ(live.contains(&objs[i]), i % 2 == 1) << i;
}

}  // namespace
