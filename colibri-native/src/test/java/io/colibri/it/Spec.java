/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.DataType;
import io.colibri.ReduceOp;

/**
 * One collective call: which, on what type, with which op, with which count argument, on how many
 * ranks. {@code count} is the API's count: elements for allReduce and broadcast, per-rank send
 * count for allGather, per-rank receive count for reduceScatter.
 */
record Spec(Coll coll, DataType type, ReduceOp op, long count, int nranks, int root) {

  enum Coll {
    ALL_REDUCE("allReduce"),
    ALL_GATHER("allGather"),
    REDUCE_SCATTER("reduceScatter"),
    BROADCAST("broadcast");

    final String apiName;

    Coll(String apiName) {
      this.apiName = apiName;
    }

    boolean reduces() {
      return this == ALL_REDUCE || this == REDUCE_SCATTER;
    }
  }

  /** Elements of each rank's input. */
  long sendElems() {
    return coll == Coll.REDUCE_SCATTER ? count * nranks : count;
  }

  /** Elements of each rank's output. */
  long recvElems() {
    return coll == Coll.ALL_GATHER ? count * nranks : count;
  }

  @Override
  public String toString() {
    String countName =
        coll == Coll.ALL_GATHER ? "sendCount" : coll == Coll.REDUCE_SCATTER ? "recvCount" : "count";
    return coll.apiName
        + "("
        + countName
        + "="
        + count
        + ", "
        + type
        + (coll.reduces() ? ", " + op : "")
        + (coll == Coll.BROADCAST ? ", root=" + root : "")
        + ") on "
        + nranks
        + " rank"
        + (nranks == 1 ? "" : "s");
  }
}
