import CVips
import CVipsShim
import DarkroomCore

/// What a ``MetadataKeeper`` keeps of an image's metadata.
///
/// ```swift
/// let keeper = MetadataKeeper(keeping: [.icc])   // the colour profile, nothing else
/// ```
public enum KeptMetadata: String, Sendable, CaseIterable, Codable {
  /// The embedded ICC colour profile.
  case icc
  /// The EXIF copyright notice (`Copyright`, tag 0x8298), alone in an EXIF block.
  case copyright
}

/// The `metadata` stage: strips the image's metadata (EXIF, XMP, IPTC, comments and the ICC
/// profile), keeping the ICC profile and/or the EXIF copyright when asked.
///
/// Without this stage, `encode` strips everything unless its `keepMetadata` keeps everything; with
/// it, the encoder writes what the stage left. The copyright is kept as an EXIF block holding that
/// one tag (JPEG, WebP, AVIF and PNG carry EXIF; GIF carries none); an XMP `dc:rights` is not
/// kept. An animation keeps its frame layout, delays and loop count either way.
///
/// ```swift
/// let credited = Pipeline(name: "credited") {
///   Fetcher(); ImageDecoder(); Resizer(width: 800, height: 800); MetadataKeeper(keeping: [.icc, .copyright]); ImageEncoder(.jpeg())
/// }
/// ```
public struct MetadataKeeper: PixelOperation {
  public static let kind = "metadata"

  /// What survives; everything else is removed.
  public var kept: Set<KeptMetadata>

  public init(keeping kept: Set<KeptMetadata> = []) { self.kept = kept }

  public var identifier: String { "metadata(\(kept.map(\.rawValue).sorted().joined(separator: ",")))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    let (icc, copyright): (Int32, Int32) = (kept.contains(.icc) ? 1 : 0, kept.contains(.copyright) ? 1 : 0)
    return try image.derive("removing metadata") { dr_prune_metadata($0, icc, copyright, $1) }
  }
}

extension VipsImage {
  /// The mark ``MetadataKeeper`` leaves: the encoder writes the metadata left on such an image.
  static let prunedMark = "darkroom-metadata-pruned"

  /// Whether a `metadata` stage chose what this image keeps.
  var metadataPruned: Bool { dr_marked(pointer, Self.prunedMark) != 0 }

  /// A text metadata field (`exif-ifd0-Copyright`, say), or `nil` when the image has none.
  public func stringField(_ name: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    guard dr_get_string_field(pointer, name, &buffer, buffer.count) == 0 else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

extension VipsImage {
  /// Whether the image has a metadata field (`icc-profile-data`, `xmp-data`, …).
  public func hasField(_ name: String) -> Bool { dr_has_field(pointer, name) != 0 }

  /// A copy with a text field set (tests and callers that attach metadata).
  package func with(field name: String, string value: String) throws(PipelineError) -> VipsImage {
    try derive("setting \(name)") { dr_with_field($0, name, value, nil, 0, $1) }
  }

  /// A copy with a binary field set (an ICC profile, an XMP packet).
  package func with(field name: String, bytes: [UInt8]) throws(PipelineError) -> VipsImage {
    try derive("setting \(name)") { input, out in
      bytes.withUnsafeBytes { dr_with_field(input, name, nil, $0.baseAddress, $0.count, out) }
    }
  }
}
