import Foundation

/// The bytes of a source, as a fetch stage returns them, with what is known about them.
///
/// ```swift
/// let fetched = try await Fetcher().process(ImageSource("a.jpg"), context: context)
/// print(fetched.bytes.count, fetched.contentType ?? "?")
/// ```
public struct FetchedData: Sendable, PipelineValue {
  public static let valueDescription = "bytes"

  /// The source the bytes came from.
  public var source: ImageSource
  /// The bytes, with a stable address for zero-copy decoding.
  public var bytes: ImageBytes
  /// The MIME type reported by the origin (HTTP `Content-Type`), when there is one.
  public var contentType: String?
  /// When the origin says the content last changed.
  public var lastModified: Date?
  /// Response metadata (HTTP headers in lower case, or file facts), for caches and notifiers.
  public var metadata: [String: String]

  public init(
    source: ImageSource, bytes: ImageBytes, contentType: String? = nil, lastModified: Date? = nil,
    metadata: [String: String] = [:]
  ) {
    self.source = source
    self.bytes = bytes
    self.contentType = contentType
    self.lastModified = lastModified
    self.metadata = metadata
  }
}

extension FetchedData: SummarizableOutput {
  public var outputSummary: OutputSummary { OutputSummary(bytes: bytes.count) }
}
