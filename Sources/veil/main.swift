print("veil")
