// The ETA as predicted work placed on slots: checked against schedules worked out by
// hand, and against what elapsed/fraction would say.
#include <catch2/catch.hpp>

#include "engine/src/progress/eta_estimator.h"

using namespace spawnpool::detail;

TEST_CASE("pending work is spread over the slots, longest first") {
  EtaInput input;
  input.parallelism = 2;
  input.pending_s = {1, 1, 1, 1, 4};
  // Longest first: slot A 4; slot B 1+1+1+1 = 4.
  CHECK(estimate_remaining_s(input) == Approx(4));
  input.parallelism = 1;
  CHECK(estimate_remaining_s(input) == Approx(8));
  input.parallelism = 8;  // more slots than commands: the longest decides
  CHECK(estimate_remaining_s(input) == Approx(4));
}

TEST_CASE("the driver's tail comes after the last slot frees, not scaled by the pace") {
  EtaInput input;
  input.parallelism = 2;
  input.pending_s = {1, 1, 1, 1, 4};
  input.tail_s = 0.3;
  CHECK(estimate_remaining_s(input) == Approx(4.3));
  input.pace = 2;  // the slots' idle share: the commands' time only
  CHECK(estimate_remaining_s(input) == Approx(8.3));
  input.pending_s.clear();  // nothing left but the tail
  CHECK(estimate_remaining_s(input) == Approx(0.3));
}

TEST_CASE("running commands keep their slots for what they have left") {
  EtaInput input;
  input.parallelism = 2;
  input.running = {{3, 5.0}, {1, 2.0}};   // 2 s and 1 s left
  input.pending_s = {2, 2};
  // Slot B frees at 1: 1+2 = 3; slot A at 2: 2+2 = 4.
  CHECK(estimate_remaining_s(input) == Approx(4));
  SECTION("a command past its prediction is nearly done, not done") {
    input.running = {{9, 5.0}};
    input.pending_s.clear();
    CHECK(estimate_remaining_s(input) == Approx(0.5));
  }
}

TEST_CASE("a narrower build (memory admission) waits for its running commands") {
  EtaInput input;
  input.parallelism = 1;                  // admission lets one run now
  input.running = {{0, 4.0}, {0, 1.0}};   // two started before it narrowed
  input.pending_s = {1};
  // The pending one starts when the last lane frees (at 4), ends at 5.
  CHECK(estimate_remaining_s(input) == Approx(5));
}

TEST_CASE("unknown commands take the typical duration, or there is no estimate") {
  EtaInput input;
  input.parallelism = 2;
  input.pending_s = {2};
  input.pending_unknown = 3;
  CHECK_FALSE(estimate_remaining_s(input).has_value());
  input.typical_s = 2;
  CHECK(estimate_remaining_s(input) == Approx(4));
  input.pending_unknown = 0;
  input.running = {{1, std::nullopt}};
  input.typical_s.reset();
  CHECK_FALSE(estimate_remaining_s(input).has_value());
  input.typical_s = 3;                    // 2 s left of a typical 3 s
  CHECK(estimate_remaining_s(input) == Approx(2));
}

TEST_CASE("the unknown commands take their place among the pending, in any order given") {
  EtaInput input;
  input.parallelism = 2;
  input.typical_s = 2.5;
  input.pending_unknown = 2;
  // Longest first: 3, 2.5, 2.5, 2, 1. Slot A 3 + 2 = 5, slot B 2.5 + 2.5 = 5, then 1 on
  // either: 6 (the unknowns placed last would give 5.5).
  input.pending_s = {3, 2, 1};  // longest first, as BuildProgress gives them
  CHECK(estimate_remaining_s(input) == Approx(6));
  input.pending_s = {1, 3, 2};
  CHECK(estimate_remaining_s(input) == Approx(6));
}

TEST_CASE("the pace of the build scales every duration") {
  EtaInput input;
  input.parallelism = 2;
  input.running = {{1, 2.0}};             // predicted 2 s, 1 s run
  input.pending_s = {2, 2};
  input.pending_unknown = 1;
  input.typical_s = 2;
  // A frees at 1, B at 0: B 2, A 1 + 2 = 3, B 2 + 2 = 4.
  CHECK(estimate_remaining_s(input) == Approx(4));
  input.pace = 1.5;                       // commands take 1.5x their predictions here
  // Running: 3 s predicted, 2 s left; pending 3, 3, 3: B 3, A 2 + 3 = 5, B 3 + 3 = 6.
  CHECK(estimate_remaining_s(input) == Approx(6));
  input.pace = 0;                         // not a pace: as predicted
  CHECK(estimate_remaining_s(input) == Approx(4));
}

TEST_CASE("nothing left is zero") {
  EtaInput input;
  CHECK(estimate_remaining_s(input) == Approx(0));
}
