import DarkroomCore
import Foundation

/// The pixels of one image table entry, in place in the table's memory map — no decode, no copy.
///
/// The entry is a lease: while it (or anything retaining it, such as a libvips image built on its
/// pixels) is alive, the table never reuses its slot, and the mapping stays valid even if the table
/// is closed. Rows are `rowBytes` apart with no padding (`width × bytesPerPixel`).
///
/// ```swift
/// if let entry = table.retrieve("user-42") {
///   entry.pixels.withMemoryRebound(to: UInt8.self) { send($0) }
/// }
/// ```
public final class ImageTableEntry: @unchecked Sendable {
  /// The entry's metadata.
  public let info: ImageTableEntryInfo
  /// The table's pixel layout.
  public let layout: PixelLayout
  /// The pixels (`height` rows of `rowBytes`), read-only.
  public let pixels: UnsafeRawBufferPointer
  let slot: Int
  private let file: ImageTableFile
  private let release: @Sendable (Int) -> Void

  init(
    info: ImageTableEntryInfo, layout: PixelLayout, slot: Int, file: ImageTableFile, release: @escaping @Sendable (Int) -> Void
  ) {
    self.info = info
    self.layout = layout
    self.slot = slot
    self.file = file
    self.release = release
    pixels = UnsafeRawBufferPointer(start: file.pixels(slot), count: info.width * info.height * layout.bytesPerPixel)
  }

  deinit { release(slot) }

  public var width: Int { info.width }
  public var height: Int { info.height }
  public var rowBytes: Int { info.width * layout.bytesPerPixel }
}

/// Told about what goes wrong in an image table (FastImageCache's
/// `imageCache:didFailWithError:`): corrupt entries found and dropped, providers that failed,
/// stores that could not find a free slot.
///
/// ```swift
/// final class Log: ImageTableDelegate {
///   func imageTable(_ table: ImageTable, didFail error: PipelineError) { print(error.message) }
/// }
/// table.delegate = log
/// ```
public protocol ImageTableDelegate: AnyObject, Sendable {
  func imageTable(_ table: ImageTable, didFail error: PipelineError)
}
