fn main() {
    println!("coder {}", env!("CARGO_PKG_VERSION"));
}
