import DarkroomCore
import Foundation

/// How pixels are laid out in an image table: 8 bits per sample, interleaved, rows packed.
///
/// ```swift
/// PixelLayout.rgba8.bytesPerPixel   // 4
/// PixelLayout(bands: 3)             // .rgb8
/// let format = try ImageTableFormat(name: "thumb-64", width: 64, height: 64, layout: .rgb8, maxCount: 1_000)
/// ```
public enum PixelLayout: String, Sendable, Codable, CaseIterable {
  case rgba8, rgb8, grayAlpha8, gray8

  /// Samples per pixel.
  public var bands: Int {
    switch self {
    case .rgba8: 4
    case .rgb8: 3
    case .grayAlpha8: 2
    case .gray8: 1
    }
  }

  /// Bytes per pixel (one byte per sample).
  public var bytesPerPixel: Int { bands }

  /// The layout with `bands` samples per pixel, if there is one.
  public init?(bands: Int) {
    guard let layout = PixelLayout.allCases.first(where: { $0.bands == bands }) else { return nil }
    self = layout
  }
}

/// A named image table format (FastImageCache's `FICImageFormat`): every entry of the table holds
/// decoded pixels of at most `width` × `height` in `layout`, and the table keeps at most
/// `maxCount` entries, replacing the least recently used.
///
/// ```swift
/// let format = try ImageTableFormat(name: "avatar-128", family: "avatars", width: 128, height: 128, layout: .rgb8, maxCount: 5_000)
/// ```
public struct ImageTableFormat: Sendable, Codable, Hashable {
  public var name: String
  /// Formats of one family are variants of the same images (sizes of an avatar, say).
  public var family: String
  public var width: Int
  public var height: Int
  public var layout: PixelLayout
  public var maxCount: Int

  /// The largest entry: 16384 × 16384 RGBA (1 GiB) — tables are for thumbnails.
  public static let maxSide = 16_384
  /// The largest table file accepted (64 GiB of slots).
  public static let maxFileBytes = 64 << 30

  /// Creates and validates a format.
  public init(name: String, family: String = "", width: Int, height: Int, layout: PixelLayout, maxCount: Int) throws {
    self.name = name
    self.family = family
    self.width = width
    self.height = height
    self.layout = layout
    self.maxCount = maxCount
    try validate()
  }

  /// Throws `invalidDefinition` with what to change when the format cannot be a table.
  public func validate() throws {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    func problem(_ text: String) -> PipelineError { PipelineError(.invalidDefinition, "image table format \"\(name)\": \(text)") }
    guard !name.isEmpty, name.count <= 64, name.allSatisfy(allowed.contains), !name.hasPrefix(".") else {
      throw problem("the name must be 1–64 letters, digits, '.', '_' or '-' (and not start with '.')")
    }
    guard family.utf8.count <= 64 else { throw problem("the family must be at most 64 bytes") }
    guard (1...Self.maxSide).contains(width), (1...Self.maxSide).contains(height) else {
      throw problem("width and height must be 1…\(Self.maxSide), got \(width)×\(height)")
    }
    guard maxCount >= 1 else { throw problem("maxCount must be at least 1, got \(maxCount)") }
    let total = slotBytes.multipliedReportingOverflow(by: maxCount)
    guard !total.overflow, total.partialValue <= Self.maxFileBytes else {
      throw problem("\(maxCount) entries of \(slotBytes) bytes exceed \(Self.maxFileBytes >> 30) GiB; lower maxCount or the size")
    }
  }

  /// Bytes of the largest entry's pixels.
  public var pixelBytes: Int { width * height * layout.bytesPerPixel }

  /// Bytes of one slot: the pixels rounded up to whole pages, so every slot starts page-aligned.
  public var slotBytes: Int { ImageTableFile.roundToPage(pixelBytes) }
}
