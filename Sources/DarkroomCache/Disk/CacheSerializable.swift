import DarkroomCore
import Foundation

/// A value a disk store can keep: a few metadata fields and one payload of bytes.
///
/// Fetched bytes and encoded images conform; decoded images belong in image tables instead.
///
/// ```swift
/// extension Thumbnail: CacheSerializable {
///   static let cacheTypeTag = "thumbnail"
///   func cacheRecord() -> CacheRecord { CacheRecord(fields: ["size": "\(size)"], payload: bytes) }
///   init(cacheRecord: CacheRecord, source: ImageSource) throws { … }
/// }
/// ```
package protocol CacheSerializable: Sendable {
  /// The tag written into entries, checked on read.
  static var cacheTypeTag: String { get }
  /// The value's byte form.
  func cacheRecord() -> CacheRecord
  /// Rebuilds a value; `source` is the source the entry was stored for.
  init(cacheRecord: CacheRecord, source: ImageSource) throws
}

/// The byte form of a cached value: string fields and one payload.
package struct CacheRecord: Sendable {
  public var fields: [String: String]
  public var payload: ImageBytes

  public init(fields: [String: String], payload: ImageBytes) {
    self.fields = fields
    self.payload = payload
  }

  /// The field `name` as a whole number in `range`; `cacheCorrupt` when it is missing or outside.
  func integer(_ name: String, in range: ClosedRange<Int> = 0...Int(Int32.max)) throws -> Int {
    guard let text = fields[name], let value = Int(text), range.contains(value) else {
      throw PipelineError(.cacheCorrupt, "a cache entry lacks a valid \(name) field")
    }
    return value
  }
}

extension EncodedImage: CacheSerializable {
  package static let cacheTypeTag = "encoded-image"

  package func cacheRecord() -> CacheRecord {
    CacheRecord(
      fields: ["format": format.rawValue, "width": String(width), "height": String(height), "partial": partial ? "1" : "0"],
      payload: bytes)
  }

  package init(cacheRecord record: CacheRecord, source: ImageSource) throws {
    guard let format = record.fields["format"].flatMap(ImageFormat.init(rawValue:)) else {
      throw PipelineError(.cacheCorrupt, "a cached image has no valid format")
    }
    self.init(
      source: source, bytes: record.payload, format: format, width: try record.integer("width"),
      height: try record.integer("height"), partial: record.fields["partial"] == "1")
  }
}

extension FetchedData: CacheSerializable {
  package static let cacheTypeTag = "fetched-data"

  package func cacheRecord() -> CacheRecord {
    var fields = metadata.reduce(into: [String: String]()) { $0["meta." + $1.key] = $1.value }
    fields["contentType"] = contentType
    fields["lastModified"] = lastModified.map { String($0.timeIntervalSince1970) }
    fields["status"] = status.map(String.init)
    return CacheRecord(fields: fields, payload: bytes)
  }

  package init(cacheRecord record: CacheRecord, source: ImageSource) throws {
    var metadata: [String: String] = [:]
    for (name, value) in record.fields where name.hasPrefix("meta.") { metadata[String(name.dropFirst(5))] = value }
    self.init(
      source: source, bytes: record.payload, contentType: record.fields["contentType"],
      lastModified: record.fields["lastModified"].flatMap(Double.init).flatMap(Self.cachedDate),
      metadata: metadata)
    status = record.fields["status"].flatMap(Int.init).flatMap { (100...999).contains($0) ? $0 : nil }
  }

  /// A date from a cache entry: finite seconds between 1970 and 9999, or none.
  private static func cachedDate(_ seconds: Double) -> Date? {
    guard seconds.isFinite, seconds >= 0, seconds <= IndexValue.maxSeconds else { return nil }
    return Date(timeIntervalSince1970: seconds)
  }
}

extension ImageSource {
  /// The source a cache key's identity names (`file:/path` or a URL).
  public init(cacheIdentity identity: String) {
    if identity.hasPrefix("file:") && !identity.hasPrefix("file://") {
      self.init(path: String(identity.dropFirst(5)))
    } else {
      self.init(identity)
    }
  }
}
