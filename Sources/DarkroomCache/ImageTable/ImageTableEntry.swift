import DarkroomCore
import Foundation

/// The pixels of one image table entry, read from the table's file into memory the entry owns —
/// no decode; one copy from the page cache.
///
/// The entry is a lease: while it (or anything retaining it, such as a libvips image built on its
/// pixels) is alive, the table does not reuse its slot. Its pixels are its own: they stay valid
/// after the table is closed, and whatever happens to the file afterwards (another process
/// truncating or overwriting it) cannot change them. Rows are `rowBytes` apart with no padding
/// (`width × bytesPerPixel`); the first row starts page-aligned.
///
/// ```swift
/// if let entry = table.retrieve("user-42") {
///   entry.pixels.withMemoryRebound(to: UInt8.self) { send($0) }  // `entry` alive meanwhile
/// }
/// ```
package final class ImageTableEntry: @unchecked Sendable {
  /// The entry's metadata.
  public let info: ImageTableEntryInfo
  /// The table's pixel layout.
  public let layout: PixelLayout
  /// The pixels (`height` rows of `rowBytes`), read-only, owned by the entry: valid while the
  /// entry is alive. Keep the entry in a variable while using them (Swift may release a temporary
  /// before its last use of the pointer), or use ``withPixels(_:)``.
  public let pixels: UnsafeRawBufferPointer
  let slot: Int
  private let storage: UnsafeMutableRawBufferPointer
  private let release: @Sendable (Int) -> Void

  /// Takes ownership of `pixels` (allocated, `width × height × bytesPerPixel` bytes).
  init(
    info: ImageTableEntryInfo, layout: PixelLayout, slot: Int, pixels: UnsafeMutableRawBufferPointer,
    release: @escaping @Sendable (Int) -> Void
  ) {
    self.info = info
    self.layout = layout
    self.slot = slot
    self.release = release
    storage = pixels
    self.pixels = UnsafeRawBufferPointer(pixels)
  }

  deinit {
    storage.deallocate()
    release(slot)
  }

  /// Calls `body` with the pixels while keeping the entry alive, so it is safe on a temporary.
  ///
  /// ```swift
  /// let bytes = table.retrieve("user-42")?.withPixels { Array($0) }
  /// ```
  public func withPixels<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
    try withExtendedLifetime(self) { try body(pixels) }
  }

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
package protocol ImageTableDelegate: AnyObject, Sendable {
  func imageTable(_ table: ImageTable, didFail error: PipelineError)
}
