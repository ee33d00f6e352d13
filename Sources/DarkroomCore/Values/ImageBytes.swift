import Foundation

/// An immutable block of bytes with a stable address, shared by reference.
///
/// Image libraries such as libvips read from the caller's memory without copying, so the memory
/// must stay put and alive for as long as any image made from it exists. `ImageBytes` owns its
/// allocation explicitly; holders (a decoded image, say) keep a reference to it, and the memory is
/// freed when the last reference goes.
///
/// ```swift
/// let bytes = ImageBytes(Data([0xFF, 0xD8, 0xFF]))
/// bytes.withUnsafeBytes { print($0.count) }   // 3
/// ```
public final class ImageBytes: Sendable, Hashable, CustomStringConvertible {
  // Written once in init, never mutated afterwards: safe to share between threads.
  nonisolated(unsafe) private let storage: UnsafeMutableRawBufferPointer

  /// The number of bytes.
  public var count: Int { storage.count }

  /// Takes ownership of memory allocated with `UnsafeMutableRawBufferPointer.allocate`.
  public init(adopting buffer: UnsafeMutableRawBufferPointer) {
    storage = buffer
  }

  /// Copies bytes from any collection of bytes.
  public convenience init(_ bytes: some Collection<UInt8>) {
    let count = bytes.count
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
    var offset = 0
    let contiguous = bytes.withContiguousStorageIfAvailable { source -> Int in
      buffer.copyMemory(from: UnsafeRawBufferPointer(source))
      return source.count
    }
    if let contiguous {
      offset = contiguous
    } else {
      for byte in bytes.prefix(count) {
        buffer[offset] = byte
        offset += 1
      }
    }
    self.init(adopting: UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: offset))
  }

  deinit { storage.deallocate() }

  /// Calls `body` with the bytes; the pointer is valid for as long as this object is alive.
  public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    try body(UnsafeRawBufferPointer(storage))
  }

  /// The start address, valid for as long as this object is alive (for handing to C libraries
  /// that keep the pointer; keep a reference to `self` next to what they return).
  public var baseAddress: UnsafeRawPointer? { UnsafeRawPointer(storage.baseAddress) }

  /// A copy of the bytes as `Data`.
  public var data: Data { Data(storage) }

  /// The first `n` bytes (fewer when the block is shorter), for sniffing formats.
  public func prefix(_ n: Int) -> [UInt8] { Array(storage.prefix(n)) }

  public static func == (lhs: ImageBytes, rhs: ImageBytes) -> Bool {
    guard lhs !== rhs else { return true }
    guard lhs.count == rhs.count else { return false }
    guard let left = lhs.storage.baseAddress, let right = rhs.storage.baseAddress else { return true }
    return memcmp(left, right, lhs.count) == 0
  }

  /// Hashes the size and the first and last 64 bytes (equality compares every byte).
  public func hash(into hasher: inout Hasher) {
    hasher.combine(count)
    hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: storage.prefix(64)))
    hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: storage.suffix(64)))
  }

  public var description: String { "\(count) bytes" }
}
