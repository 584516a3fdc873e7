def run_item(item, rctx): raise NotImplementedError
