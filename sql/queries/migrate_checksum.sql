SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')
