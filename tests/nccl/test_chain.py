from ncclsim import *
done()
