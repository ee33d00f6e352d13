import DarkroomCore
import Foundation
import Testing

@Suite("Operation IDs")
struct OperationIDTests {
  @Test("a new operation ID is a random version 4 UUID of the RFC 4122 variant, and 10,000 are distinct")
  func randomVersion4() {
    let ids = (0..<10_000).map { _ in OperationID() }
    #expect(Set(ids).count == ids.count)
    for id in ids.prefix(100) {
      let text = Array(id.description)
      #expect(text.count == 36)
      #expect(text[14] == "4")
      #expect("89ab".contains(text[19]))
      #expect(UUID(uuidString: id.description) == id.uuid)
    }
    // Every bit outside the version and variant varies across the IDs.
    var ones = [Int](repeating: 0, count: 128)
    for id in ids {
      withUnsafeBytes(of: id.uuid.uuid) { raw in
        for bit in 0..<128 where raw[bit / 8] & (0x80 >> UInt8(bit % 8)) != 0 { ones[bit] += 1 }
      }
    }
    let fixed = Set([48, 49, 50, 51, 64, 65])  // the version nibble and the variant's two bits
    for bit in 0..<128 where !fixed.contains(bit) { #expect((4_000...6_000).contains(ones[bit]), "bit \(bit)") }
  }
}
