/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/** Service provider interface between the Colibri API and its implementations. */
package io.colibri.spi;
