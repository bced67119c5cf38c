/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * RDMA verbs support for Colibri. The artifact's linux-x86_64 jar carries the verbs network plugin
 * (libcolibri_verbs.so), which colibri-native extracts and the native core loads for transport
 * VERBS; this package has no classes yet (diagnostics may come here).
 */
package io.colibri.verbs;
