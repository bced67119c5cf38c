/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.common;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.StreamWriteFeature;
import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.core.util.Separators;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectWriter;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.dataformat.csv.CsvMapper;
import com.fasterxml.jackson.dataformat.csv.CsvParser;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * The Jackson mappers of the bench tool: JSON (result files, {@code doctor --json}) and CSV
 * (result files). A record's components are named in snake case ({@code sizeBytes} is
 * {@code size_bytes}), in the order of its {@code @JsonPropertyOrder}. Numbers are written as they
 * are held: a {@link BigDecimal} in plain notation ({@code 0.000125}, never {@code 1.25E-4}), so
 * files keep a fixed number of decimals.
 */
public final class Mappers {

  /**
   * JSON, read strictly (a document followed by more text is an error, and so is a duplicate
   * field) and written indented by two spaces, {@code "name": value}, one value per line.
   */
  public static final ObjectMapper JSON =
      JsonMapper.builder()
          .propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .enable(StreamWriteFeature.WRITE_BIGDECIMAL_AS_PLAIN)
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .build();

  private static final ObjectWriter JSON_WRITER =
      JSON.writer(
          new DefaultPrettyPrinter()
              .withSeparators(
                  Separators.createDefaultInstance()
                      .withObjectFieldValueSpacing(Separators.Spacing.AFTER))
              .withObjectIndenter(new DefaultIndenter("  ", "\n"))
              .withArrayIndenter(new DefaultIndenter("  ", "\n")));

  /**
   * CSV: '#' lines are comments, blank lines and the spaces around unquoted values are skipped;
   * reads rows as arrays of strings (the caller finds the columns by the header's names).
   */
  public static final CsvMapper CSV =
      CsvMapper.builder()
          .propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .enable(StreamWriteFeature.WRITE_BIGDECIMAL_AS_PLAIN)
          .enable(CsvParser.Feature.WRAP_AS_ARRAY)
          .enable(CsvParser.Feature.SKIP_EMPTY_LINES)
          .enable(CsvParser.Feature.TRIM_SPACES)
          .enable(CsvParser.Feature.ALLOW_COMMENTS)
          .build();

  private Mappers() {}

  /**
   * {@code value} as indented JSON text.
   *
   * @param value a record, list, map, ...
   * @return the JSON text, ending with a newline
   * @throws UncheckedIOException if Jackson cannot write it
   */
  public static String json(Object value) {
    try {
      return JSON_WRITER.writeValueAsString(value) + "\n";
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(
          "cannot write "
              + value.getClass().getSimpleName()
              + " as JSON: "
              + e.getOriginalMessage(),
          e);
    }
  }

  /**
   * {@code v} rounded to {@code digits} significant digits.
   *
   * @param v the number
   * @param digits how many significant digits
   * @return the rounded number, or null when {@code v} is not finite
   */
  public static BigDecimal significant(double v, int digits) {
    return Double.isFinite(v)
        ? BigDecimal.valueOf(v).round(new MathContext(digits, RoundingMode.HALF_EVEN))
        : null;
  }

  /**
   * {@code v} rounded to {@code decimals} decimals.
   *
   * @param v the number
   * @param decimals how many decimals
   * @return the rounded number, or null when {@code v} is not finite
   */
  public static BigDecimal decimals(double v, int decimals) {
    return Double.isFinite(v)
        ? BigDecimal.valueOf(v).setScale(decimals, RoundingMode.HALF_EVEN)
        : null;
  }

  /**
   * What Jackson found wrong in a text, and where.
   *
   * @param e Jackson's exception
   * @return "Unexpected ... at line 3, column 7"
   */
  public static String describe(JsonProcessingException e) {
    return e.getLocation() == null
        ? e.getOriginalMessage()
        : e.getOriginalMessage()
            + " at line "
            + e.getLocation().getLineNr()
            + ", column "
            + e.getLocation().getColumnNr();
  }
}
