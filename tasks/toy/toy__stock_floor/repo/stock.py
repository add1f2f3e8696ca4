def stock_after(stock, sold):
    """Units left after a sale; stock never goes below zero."""
    return max(stock - sold, 1)
