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
  /// The HTTP status of the final response (nil for files).
  public var status: Int?
  /// True when a conditional request was answered `304 Not Modified`: there are no bytes, and
  /// the cached copy the validators came from is still good.
  public var notModified: Bool

  public init(
    source: ImageSource, bytes: ImageBytes, contentType: String? = nil, lastModified: Date? = nil,
    metadata: [String: String] = [:]
  ) {
    self.source = source
    self.bytes = bytes
    self.contentType = contentType
    self.lastModified = lastModified
    self.metadata = metadata
    self.status = nil
    self.notModified = false
  }

  /// The entity tag of the response (`ETag`), for revalidation.
  public var etag: String? { metadata["etag"] }

  /// How long the response may be used without revalidation, from its cache headers.
  package func freshness(now: Date = Date()) -> Freshness { Freshness(headers: metadata, now: now) }
}

extension FetchedData: SummarizableOutput {
  public var outputSummary: OutputSummary { OutputSummary(bytes: bytes.count) }
}
