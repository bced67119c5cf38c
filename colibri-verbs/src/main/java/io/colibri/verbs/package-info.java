/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * RDMA verbs support for Colibri: will hold the verbs transport plugin and its diagnostics. Empty
 * until the verbs path lands.
 */
package io.colibri.verbs;
