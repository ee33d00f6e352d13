import Darkroom
import Foundation

/// What `darkroom run … --report FILE` writes into one HTML page: every output with a
/// thumbnail, every failure, the time per image and the pipeline (see `RunReport+HTML.swift`).
struct RunReport: Sendable {
  /// One file a run wrote.
  struct Output: Sendable, Encodable {
    var source: String
    var variant: String?
    var path: String
    var width: Int?
    var height: Int?
    var format: String?
    var bytes: Int?
    /// The input's time (all its variants), in milliseconds.
    var milliseconds: Double
    /// A small WebP of the output as a `data:` URL, or `nil` when it could not be made.
    var thumbnail: String?
  }

  /// One input (or variant) that failed.
  struct Failure: Sendable, Encodable {
    var source: String
    var variant: String?
    var code: String
    var message: String
    var stage: String?
  }

  var pipelineName: String
  /// The pipeline file's text, shown escaped.
  var pipelineText: String
  var summary: String
  var outputs: [Output]
  var failures: [Failure]
  /// Milliseconds per input.
  var durations: [Double]

  /// The longest side of a thumbnail, in pixels.
  static let thumbnailSide = 96
  /// A thumbnail larger than this (bytes of WebP) is left out: the page stays about 2–3 KB per
  /// output (30 MB for 10,000).
  static let maxThumbnailBytes = 12_000
  /// The most bytes of the pipeline file shown.
  static let maxPipelineBytes = 1_000_000

  /// The pipeline file's text as UTF-8 (invalid bytes replaced), at most ``maxPipelineBytes``;
  /// read off the cooperative pool.
  static func pipelineText(_ path: String) async -> String {
    let data = try? await BlockingPool.shared.run {
      try FileHandle(forReadingFrom: URL(fileURLWithPath: path)).read(upToCount: maxPipelineBytes) ?? Data()
    }
    return String(decoding: data ?? Data(), as: UTF8.self)
  }
}
